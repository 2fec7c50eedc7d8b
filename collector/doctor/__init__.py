"""``agent-collector doctor``: checks that explain what is wrong and how to fix it."""
