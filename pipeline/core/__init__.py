"""The stage interface: what a stage is given (settings, defaults, checked values) and gives back (results, errors).

Also the component specs a stage chooses from (read without importing them) and numbers as the messages show them.
"""
