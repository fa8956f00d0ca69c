"""Starting the app: the one Qt application of a process (qt_application.py), the launch window that shows before
PyTorch loads (launch.py), the icon, and the settings remembered between runs."""
