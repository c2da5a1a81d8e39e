"""The torch pieces every method, training and evaluation share: the sentence encoder and its poolings
(:mod:`.encoder`), its test-time head (:mod:`.encoder_head`), the legacy Adam of BERT-era released code
(:mod:`.optim`). Ground floor (the sentence-transformers folder format is :mod:`sentlab.export`)."""
