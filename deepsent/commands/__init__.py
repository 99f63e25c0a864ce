"""The commands of the deepsent CLI, one module each, named after its command."""
