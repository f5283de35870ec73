"""Using a trained run: load a member, evaluate it, render it, export its actors."""
