package layered

func High(l Low) int { return l.N }
