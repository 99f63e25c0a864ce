"""The models: the towers, a trained model as a file and a service, its training, search over the corpus, analysis."""
