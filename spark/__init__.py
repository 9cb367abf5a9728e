"""The Spark audit of the controller event logs (DESIGN §2.3, docs/audit.md).

- `contract` (the event format and the finding kinds, plain Python) and `schema` (the same as
  Spark StructTypes);
- `extract`: find and read every node's files;
- `transform`: pure DataFrame -> DataFrame functions, one module per audit family;
- `load` and `report`: Parquet tables, the JSON summary, the HTML report;
- `job`: wires them, and is the `spark-submit` entry point; `cli` holds `brokergroup audit` and
  `bench audit`, and `options` the flags, both without a Spark import (the `audit` extra is optional);
- `invariants`: the findings once more as plain Python over lists of dicts. It is the unit
  tests' oracle and the `--fail-on-violations` cross-check;
- `simulate` and `generate`: synthetic logs with planted anomalies; `bench`: the benchmark.

The audit reads the event format only, never controller code (import-linter contracts).
"""
