"""Text as it comes in: users' files read within bounds, the Home Depot judgment files, the paper's normalisation."""
