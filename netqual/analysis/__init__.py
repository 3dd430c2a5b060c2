"""Analysis: statistics, verdicts, the matrix, localisation, diff and interference."""
