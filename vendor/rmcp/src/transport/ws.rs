// Maybe we don't really need a ws implementation?
