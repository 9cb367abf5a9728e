"""Local clusters: controllers (and later brokers) as processes on 127.0.0.1."""
