"""RocketMQ response codes, their HTTP status, and the controller's error type.

The numbers and names are RocketMQ's (`ResponseCode.java`); the API returns both so that
operators who know mqadmin recognise them. The HTTP status is ours: one table, here.
"""

from __future__ import annotations

import enum
from typing import Any


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


_HTTP_STATUS: dict[ResponseCode, int] = {
    ResponseCode.SUCCESS: 200,
    ResponseCode.SYSTEM_ERROR: 500,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: 404,
    ResponseCode.NO_PERMISSION: 403,
    ResponseCode.CONTROLLER_INVALID_REQUEST: 400,
    ResponseCode.CONTROLLER_NOT_LEADER: 503,
    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST: 404,
    ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: 404,
}


def http_status(code: ResponseCode) -> int:
    """HTTP status for a response code: state conflicts are 409, see the table for the rest."""
    return _HTTP_STATUS.get(code, 409)


class ControllerError(Exception):
    """A RocketMQ-coded failure. `data` is the body RocketMQ sends along with some errors."""

    def __init__(self, code: ResponseCode, remark: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code.name} ({int(code)}): {remark}")
        self.code = code
        self.remark = remark
        self.data = data or {}

    def to_body(self) -> dict[str, Any]:
        return {**self.data, "code": int(self.code), "name": self.code.name, "remark": self.remark}
