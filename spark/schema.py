"""The controller event-log line as Spark reads it: an explicit schema, never inferred.

Built from `contract.FIELDS`, the format's one table, field for field and in the controller's
key order. Columns the format marks as non-null are declared non-nullable for documentation,
but Spark's file reader treats every column as nullable, so `transform.prepare` checks them
and counts the lines that break them.

A read adds two columns: `_corrupt_record` (the raw text of a line that is not JSON or does
not fit the types, PERMISSIVE mode) and `sourceFile`.
"""

from __future__ import annotations

from pyspark.sql import types as T

from brokergroup.spark import contract

CORRUPT_COLUMN = "_corrupt_record"
FILE_COLUMN = "sourceFile"

SPARK_TYPES: dict[str, T.DataType] = {
    "int": T.IntegerType(),
    "long": T.LongType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
    "long[]": T.ArrayType(T.LongType(), containsNull=False),
}


def struct(fields: dict[str, tuple[str, bool]]) -> T.StructType:
    return T.StructType(
        [T.StructField(name, SPARK_TYPES[kind], nullable=null) for name, (kind, null) in fields.items()]
    )


EVENT_SCHEMA = struct(contract.FIELDS)
"""One event-log line (DESIGN §2.3)."""

READ_SCHEMA = T.StructType([*EVENT_SCHEMA.fields, T.StructField(CORRUPT_COLUMN, T.StringType())])
"""The schema handed to the JSON reader: the format plus the PERMISSIVE corrupt-record column."""

FINDING_SCHEMA = struct(contract.FINDING_FIELDS)
"""One row of the `findings` table."""
