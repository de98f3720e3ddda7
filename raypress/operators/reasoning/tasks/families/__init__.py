"""The reasoning task families, one module each, over reasoning-gym.

Why a package: every family is a step format, an exact step checker and generators of worked and
flawed solutions of its own, on a shared base (``rg_family``) and shared step arithmetic
(``step_text``, ``flaws``); ``tasks.catalog`` holds them by name.
"""
