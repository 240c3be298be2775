package cycle

type B struct{}

func (B) Of(a A) string { return a.Name() }
