"""Helpers of the tests: server wrappers, model builders, samples, scrapers (no tests here)."""
