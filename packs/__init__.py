"""Task packs: build immutable, versioned archives of approved task versions; import tasks back."""
