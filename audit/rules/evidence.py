"""Rules of category evidence (filled in as that part of wireup lands)."""
