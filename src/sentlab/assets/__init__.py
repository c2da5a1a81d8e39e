"""What comes from outside, and how it is found: the resolver of data sets and models (:mod:`.resolve`: the mirror,
the caches, the download), resumable downloads and hub snapshots (:mod:`.download`), NLTK's resources
(:mod:`.nltk_resources`) and tensor files read without unpickling (:mod:`.weights`). Ground floor."""
