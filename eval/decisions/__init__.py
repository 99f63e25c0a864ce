"""The decisions of the chain (the mix, the ship choice, the gate set, the served mode's queries), robust to noise."""
