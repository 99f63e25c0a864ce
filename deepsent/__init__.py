"""The composition root: the chain declared once, its runner and records, and its front doors (the CLI, the server)."""
