"""Mirrors the PyTorch NLP tutorial "Deep Learning with PyTorch" (bag-of-words
classifier, https://pytorch.org/tutorials/beginner/nlp/deep_learning_tutorial.html):
word indices from a dict, bag-of-words vectors filled with vec[i] += 1, a
LongTensor target, an nn.Linear + F.log_softmax classifier trained by SGD with
NLLLoss, and a word's weight column read before and after training."""
from script_data import set_weights

TOLERANCE = dict(rtol=1e-4, atol=1e-6)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    data = [("me gusta comer en la cafeteria".split(), "SPANISH"),
            ("Give it to me".split(), "ENGLISH"),
            ("No creo que sea una buena idea".split(), "SPANISH"),
            ("No it is not a good idea to get lost at sea".split(), "ENGLISH")]
    test_data = [("Yo creo que si".split(), "SPANISH"),
                 ("it is lost on me".split(), "ENGLISH")]
    word_to_ix = {}
    for sent, _ in data + test_data:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    VOCAB_SIZE, NUM_LABELS = len(word_to_ix), 2
    label_to_ix = {"SPANISH": 0, "ENGLISH": 1}

    class BoWClassifier(nn.Module):
        def __init__(self, num_labels, vocab_size):
            super(BoWClassifier, self).__init__()
            self.linear = nn.Linear(vocab_size, num_labels)

        def forward(self, bow_vec):
            return F.log_softmax(self.linear(bow_vec), dim=1)

    def make_bow_vector(sentence, word_to_ix):
        vec = torch.zeros(len(word_to_ix))
        for word in sentence:
            vec[word_to_ix[word]] += 1
        return vec.view(1, -1)

    def make_target(label, label_to_ix):
        return torch.LongTensor([label_to_ix[label]])

    model = set_weights(torch, BoWClassifier(NUM_LABELS, VOCAB_SIZE), seed=40)
    for param in model.parameters():
        print(param)
    with torch.no_grad():
        before = [model(make_bow_vector(instance, word_to_ix)) for instance, _ in test_data]
    creo_before = next(model.parameters())[:, word_to_ix["creo"]].clone()
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(100):
        for instance, label in data:
            model.zero_grad()
            bow_vec = make_bow_vector(instance, word_to_ix)
            target = make_target(label, label_to_ix)
            log_probs = model(bow_vec)
            loss = loss_function(log_probs, target)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        after = [model(make_bow_vector(instance, word_to_ix)) for instance, _ in test_data]
    creo_after = next(model.parameters())[:, word_to_ix["creo"]]
    print(creo_before, creo_after)
    assert [a.argmax().item() for a in after] == [0, 1]
    assert make_bow_vector("No No creo".split(), word_to_ix)[0, word_to_ix["No"]].item() == 2
    return dict(before=before, after=after, creo=[creo_before, creo_after], vocab=VOCAB_SIZE)
