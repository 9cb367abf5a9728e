"""What the broker's and the controller's schemathesis conformance tests share: the checks of a
live API against its own OpenAPI document, and how many requests to generate."""

from __future__ import annotations

import hypothesis
from schemathesis import checks

DOCUMENT_CHECKS = [
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]
"""A documented status, a documented content type, a body matching the documented schema, and
invalid data refused with a 4xx; each test adds its own `not_a_server_error`."""

SETTINGS = hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)
