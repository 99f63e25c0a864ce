"""The towers of the two-tower model (paper eqs. 1-3 and the Table IV baselines), their batches and catalog."""
