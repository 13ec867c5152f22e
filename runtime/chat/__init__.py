"""`gatewright chat`: the interactive terminal host (`app`), its rendering (`view`), its approval question (`ask`)
and its input line (`prompt`). It uses rich and prompt_toolkit, which nothing on the `gatewright acp` path imports.
"""
