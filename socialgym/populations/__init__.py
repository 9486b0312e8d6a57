"""Bundled parameter sets of scripted populations (``socialgym.baselines.social_users``), one
JSON file each: ``{"name", "kind": "social_users", "params", "meta"}``. Load one by its file
name without ``.json`` (``load_population("default")``)."""
