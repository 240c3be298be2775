package cycle

type A struct{ b *B }

func (a A) Name() string { return "a" }
