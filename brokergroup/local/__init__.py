"""Local clusters: controllers and broker sets as processes on 127.0.0.1 (`brokergroup local`, the demo, tests)."""
