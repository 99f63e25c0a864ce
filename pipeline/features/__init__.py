"""From clicks to training data: clicked pairs, skipped titles, letter-trigram hashing, negatives, feature shards."""
