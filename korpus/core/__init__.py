"""The foundation every floor stands on, importing nothing else of korpus: the data model (`datamodel`), the one
settings object (`settings`), the offline model store (`model_store`) and the typed errors (`errors`)."""
