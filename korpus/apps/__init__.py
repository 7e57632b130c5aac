"""The top floor: what people and programs use — the CLI (`cli/`), the HTTP API (`api`), the review workbench
(`review_web`) and `korpus status` (`status`). Applications import the stages (`tasks/`) and the foundation
(`korpus/core`); nothing below imports them."""
