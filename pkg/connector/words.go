package connector

// words are the values of generated string fields: short, readable, and
// boxed once (wordValues) so that putting one into a StructuredData map does
// not allocate. Both tables are read-only.
var words = [...]string{
	"amber", "anchor", "apple", "arrow", "aspen", "atlas", "autumn", "badge",
	"bamboo", "banner", "basil", "beacon", "birch", "bison", "blossom",
	"bolt", "breeze", "brick", "bridge", "bronze", "brook", "cabin", "cactus",
	"canyon", "carbon", "cargo", "cedar", "cello", "chalk", "cherry",
	"cinder", "citrus", "clover", "cobalt", "comet", "copper", "coral",
	"cotton", "crane", "crater", "cricket", "crystal", "cypress", "dahlia",
	"delta", "desert", "dune", "eagle", "ember", "falcon", "fern", "fjord",
	"flint", "forest", "fossil", "galaxy", "garnet", "geyser", "ginger",
	"glacier", "granite", "gravel", "harbor", "hazel", "heron", "hollow",
	"honey", "horizon", "iris", "island", "ivory", "jade", "jasper",
	"juniper", "kelp", "kestrel", "lagoon", "lantern", "lava", "lemon",
	"lichen", "lily", "linen", "lotus", "lunar", "magnet", "maple", "marble",
	"meadow", "mesa", "meteor", "mint", "moss", "nectar", "nickel", "nova",
	"oak", "oasis", "ocean", "olive", "onyx", "opal", "orbit", "orchid",
	"otter", "palm", "pebble", "pepper", "pine", "planet", "plum", "prairie",
	"prism", "quartz", "quill", "raven", "reef", "ridge", "river", "robin",
	"saffron", "sage", "salmon", "sand", "sapphire", "shadow", "shale",
	"silver", "slate", "sparrow", "spruce", "steel", "stone", "storm",
	"summit", "swift", "thistle", "thunder", "tide", "timber", "topaz",
	"tulip", "tundra", "umber", "valley", "velvet", "violet", "walnut",
	"willow", "winter", "wren", "yarrow", "zephyr", "zinc",
}

var wordValues = func() [len(words)]any {
	var out [len(words)]any
	for i, w := range words {
		out[i] = w
	}
	return out
}()
