"""The data side of the chain: click logs in, training data out, and the interface and store every stage shares."""
