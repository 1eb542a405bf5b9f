"""Mirrors the PyTorch tutorials "Datasets & DataLoaders" and "Transforms"
(https://pytorch.org/tutorials/beginner/basics/data_tutorial.html,
https://pytorch.org/tutorials/beginner/basics/transforms_tutorial.html): a custom
Dataset with transform and target_transform (a one-hot label by
zeros(10).scatter_(0, torch.tensor(y), value=1)), a shuffled DataLoader read with
next(iter(...)), one image squeezed out of the batch."""
from script_data import digits


def main(torch, workdir):
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    torch.manual_seed(0)
    images, labels, _, _ = digits()

    class CustomImageDataset(Dataset):
        def __init__(self, images, labels, transform=None, target_transform=None):
            self.images, self.img_labels = images, labels
            self.transform = transform
            self.target_transform = target_transform

        def __len__(self):
            return len(self.img_labels)

        def __getitem__(self, idx):
            image = self.images[idx].reshape(1, 8, 8)
            label = int(self.img_labels[idx])
            if self.transform:
                image = self.transform(image)
            if self.target_transform:
                label = self.target_transform(label)
            return image, label

    def to_tensor(image):
        return torch.from_numpy(image)

    def one_hot(y):
        return torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(y), value=1)

    training_data = CustomImageDataset(images, labels, transform=to_tensor, target_transform=one_hot)
    train_dataloader = DataLoader(training_data, batch_size=64, shuffle=True)
    train_features, train_labels = next(iter(train_dataloader))
    print(f"Feature batch shape: {train_features.size()}")
    print(f"Labels batch shape: {train_labels.size()}")
    img = train_features[0].squeeze()
    label = train_labels[0]
    print(f"Label: {label}")
    assert img.shape == (8, 8) and label.sum().item() == 1.0
    first_image, first_label = training_data[0]
    plain = DataLoader(CustomImageDataset(images, labels), batch_size=64)
    _, int_labels = next(iter(plain))
    return dict(features=str(train_features.size()), labels=str(train_labels.size()),
                one_hot=first_label, image=first_image.sum().item(),
                int_labels_dtype=str(int_labels.dtype).split(".")[-1], int_labels=int_labels[:10],
                batches=len(train_dataloader))
