"""Built-in claims, one module per result family (each defines ``CLAIMS``)."""
