"""deepsent package."""
