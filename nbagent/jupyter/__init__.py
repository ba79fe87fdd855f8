"""nbagent in Jupyter: the only package that imports IPython, ipykernel or ipywidgets."""
