"""The Textual console: app, screens, widgets. Reads state only through a Source."""
