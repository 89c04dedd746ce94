"""Rules of category build (filled in as that part of wireup lands)."""
