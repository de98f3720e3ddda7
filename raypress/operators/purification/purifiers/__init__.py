"""What every purifier shares: how it hands back its rows."""
