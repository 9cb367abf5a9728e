"""The Spark audit of the controller event logs (DESIGN §2.3, issue 8).

Extract (`extract`), transform (`transform`, pure DataFrame -> DataFrame functions, one module
per audit family) and load (`load`, `report`) are separate; `job` wires them and is also the
`spark-submit` entry point. `invariants` holds the invariant logic once more as plain Python
over lists of dicts: the unit tests' oracle and the `--fail-on-violations` cross-check.
`generate` writes synthetic logs with planted anomalies; `bench` measures the job.

The audit reads the event format only (`schema`), never controller code.
"""
