"""Display words shared by every table, page and figure: token and block labels, reference names, ratios with
intervals."""
