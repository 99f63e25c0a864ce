"""A trained model as a file and a service: the saved format, the text encoder, MLflow logging, loading and the registry."""
