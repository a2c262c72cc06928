"""Data shipped inside the package (ASAP sets 7 and 8 with their rubrics), so a fresh install runs its demo."""
