"""Rules of category launchers (filled in as that part of wireup lands)."""
