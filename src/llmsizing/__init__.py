"""llmsizing."""
