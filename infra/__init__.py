"""How to run the real services: the local stack (``infra.stack``) and deployment notes."""
