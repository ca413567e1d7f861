"""HTTP monitoring: the real server's endpoints (/varz, /connz, /subsz, /healthz, ...)."""
