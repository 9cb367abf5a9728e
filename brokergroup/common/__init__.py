"""Small shared pieces: settings loading, logging, process helpers."""
