package layered

type Low struct{ N int }
